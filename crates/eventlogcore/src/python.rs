//! The Python module `shufflelab_eventlogcore` (built by maturin with the `python` feature).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt;
use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::{Columns, EventKeys, Scan, Value, Values, COLUMNS};

/// Task rows decoded from a chunk's task ends, as columns (the names and order of ``TaskRow``).
#[pyclass(module = "shufflelab_eventlogcore", frozen)]
struct TaskColumns {
    inner: Columns,
}

fn list<'py>(py: Python<'py>, v: &Values) -> PyResult<Bound<'py, PyList>> {
    match v {
        Values::Int(c) => PyList::new(py, c.iter().copied()),
        Values::Float(c) => PyList::new(py, c.iter().copied()),
        Values::Bool(c) => PyList::new(py, c.iter().copied()),
        Values::Str(c) => PyList::new(py, c.iter().map(String::as_str)),
    }
}

#[pymethods]
impl TaskColumns {
    fn __len__(&self) -> usize {
        self.inner.len
    }

    /// Column name -> list of values, in ``TaskRow`` field order.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, col) in COLUMNS.iter().zip(&self.inner.cols) {
            d.set_item(name, list(py, col)?)?;
        }
        Ok(d)
    }

    /// A float column's values as native doubles (``memoryview(...).cast("d")``), so the caller
    /// sums Python floats in the same order as from a list.
    fn floats<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        match self.inner.column(name) {
            Some(Values::Float(c)) => {
                let mut raw = Vec::with_capacity(c.len() * 8);
                for x in c {
                    raw.extend_from_slice(&x.to_ne_bytes());
                }
                Ok(PyBytes::new(py, &raw))
            }
            _ => Err(pyo3::exceptions::PyKeyError::new_err(format!(
                "{name}: not a float column"
            ))),
        }
    }

    /// (successful, end_reason == "FetchFailed", speculative) counts and the sums of
    /// remote_bytes, local_bytes and shuffle_write_bytes (exact).
    fn counts(&self) -> (usize, usize, usize, i128, i128, i128) {
        let c = &self.inner;
        let count = |name: &str| match c.column(name) {
            Some(Values::Bool(v)) => v.iter().filter(|x| **x).count(),
            _ => 0,
        };
        let sum = |name: &str| match c.column(name) {
            Some(Values::Int(v)) => v.iter().map(|x| i128::from(*x)).sum(),
            _ => 0,
        };
        let fetch_failed = match c.column("end_reason") {
            Some(Values::Str(v)) => v.iter().filter(|r| r.as_str() == "FetchFailed").count(),
            _ => 0,
        };
        (
            count("successful"),
            fetch_failed,
            count("speculative"),
            sum("remote_bytes"),
            sum("local_bytes"),
            sum("shuffle_write_bytes"),
        )
    }

    /// Append the rows to the CSV file ``path`` (created if missing); returns the longest line's
    /// length in bytes. Releases the GIL.
    fn write_csv(&self, py: Python<'_>, path: PathBuf) -> PyResult<usize> {
        py.allow_threads(|| -> std::io::Result<usize> {
            let f = OpenOptions::new().append(true).create(true).open(&path)?;
            let mut w = BufWriter::with_capacity(1 << 20, f);
            let longest = self.inner.write_csv(&mut w)?;
            w.flush()?;
            Ok(longest)
        })
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", path.display())))
    }
}

/// A chunk of a log split into lines (see ``scan``).
#[pyclass(module = "shufflelab_eventlogcore")]
struct Chunk {
    data: Py<PyBytes>,
    scan: Scan,
}

fn pieces<'py>(
    py: Python<'py>,
    data: &[u8],
    ranges: &[(usize, usize)],
) -> PyResult<Bound<'py, PyList>> {
    PyList::new(
        py,
        ranges.iter().map(|&(a, b)| PyBytes::new(py, &data[a..b])),
    )
}

#[pymethods]
impl Chunk {
    /// Task-start lines.
    #[getter]
    fn starts(&self) -> usize {
        self.scan.starts
    }

    /// Task-end lines.
    #[getter]
    fn n_ends(&self) -> usize {
        self.scan.ends.len()
    }

    /// Every line that is neither a task start nor a task end, in order.
    fn others<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        pieces(py, self.data.bind(py).as_bytes(), &self.scan.others)
    }

    /// The task starts that are not visibly whole (to be checked by the caller).
    fn odd_starts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        pieces(py, self.data.bind(py).as_bytes(), &self.scan.odd_starts)
    }

    /// The task-end lines, in order.
    fn end_lines<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        pieces(py, self.data.bind(py).as_bytes(), &self.scan.ends)
    }

    /// What follows the chunk's last newline.
    fn last<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let (a, b) = self.scan.last;
        PyBytes::new(py, &self.data.bind(py).as_bytes()[a..b])
    }

    /// The task ends decoded (once; None when a line does not fit the typed decoding).
    fn columns(&mut self) -> Option<TaskColumns> {
        self.scan.columns.take().map(|inner| TaskColumns { inner })
    }

    /// The keys of the ``i``-th task end: (top level, Task Info, Task Metrics).
    fn end_keys(&self, py: Python<'_>, i: usize) -> Option<EventKeys> {
        let (a, b) = *self.scan.ends.get(i)?;
        super::event_keys(&self.data.bind(py).as_bytes()[a..b])
    }
}

/// Split a chunk (whole lines and the start of the next) and decode its task ends; releases the GIL.
#[pyfunction]
fn scan(py: Python<'_>, data: Bound<'_, PyBytes>) -> Chunk {
    let bytes = data.as_bytes();
    let scan = py.allow_threads(|| super::scan(bytes));
    Chunk {
        data: data.unbind(),
        scan,
    }
}

/// One task-end line as a ``TaskRow`` tuple; None when it does not fit the typed decoding.
#[pyfunction]
fn task_row<'py>(py: Python<'py>, line: &[u8]) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some(row) = super::task_row(line) else {
        return Ok(None);
    };
    let items: Vec<Bound<'py, PyAny>> = row
        .into_iter()
        .map(|v| match v {
            Value::I(x) => x.into_bound_py_any(py),
            Value::F(x) => x.into_bound_py_any(py),
            Value::B(x) => x.into_bound_py_any(py),
            Value::S(x) => x.into_bound_py_any(py),
        })
        .collect::<PyResult<_>>()?;
    PyTuple::new(py, items).map(Some)
}

#[pymodule]
fn shufflelab_eventlogcore(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TaskColumns>()?;
    m.add_class::<Chunk>()?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(task_row, m)?)?;
    m.add("COLUMNS", COLUMNS.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
