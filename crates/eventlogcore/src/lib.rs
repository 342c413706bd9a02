//! shufflelab's event-log core: the `SparkListenerTaskEnd` lines of a Spark event log -- most of
//! a big log's bytes -- decoded into task-row columns, for `shufflelab analyze`'s parser
//! (`src/shufflelab/eventlog/events.py`), which keeps every other decision (other events, damaged
//! and torn lines, unknown fields) in Python.
//!
//! The decoding is the same as the Python path's typed decoder (`eventlog/taskend.py`, msgspec):
//! the same fields with the same defaults, integers as JSON integers only, the rest of the event
//! skipped. A line whose fields do not fit (a float or null where an integer is expected, a value
//! out of range, invalid JSON, a repeated field) is not decoded here: the caller then reads the
//! whole chunk's task ends on the Python path, so both paths give the same rows.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::io::{self, Write};

/// How a task-end line starts (Spark writes the event name first, without spaces).
pub const TASK_END: &[u8] = b"{\"Event\":\"SparkListenerTaskEnd\",";
/// How a task-start line starts.
pub const TASK_START: &[u8] = b"{\"Event\":\"SparkListenerTaskStart\",";

const NS_PER_MS: f64 = 1_000_000.0;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Reason {
    #[serde(rename = "Reason")]
    reason: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Info {
    #[serde(rename = "Task ID")]
    task_id: i64,
    #[serde(rename = "Index")]
    index: i64,
    #[serde(rename = "Attempt")]
    attempt: i64,
    #[serde(rename = "Launch Time")]
    launch: i64,
    #[serde(rename = "Finish Time")]
    finish: i64,
    #[serde(rename = "Executor ID")]
    executor: String,
    #[serde(rename = "Host")]
    host: String,
    #[serde(rename = "Speculative")]
    speculative: bool,
    #[serde(rename = "Failed")]
    failed: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ShuffleRead {
    #[serde(rename = "Remote Blocks Fetched")]
    remote_blocks: i64,
    #[serde(rename = "Local Blocks Fetched")]
    local_blocks: i64,
    #[serde(rename = "Fetch Wait Time")]
    fetch_wait: i64,
    #[serde(rename = "Remote Bytes Read")]
    remote_bytes: i64,
    #[serde(rename = "Remote Bytes Read To Disk")]
    remote_to_disk: i64,
    #[serde(rename = "Local Bytes Read")]
    local_bytes: i64,
    #[serde(rename = "Total Records Read")]
    records: i64,
    #[serde(rename = "Remote Requests Duration")]
    reqs_duration: i64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ShuffleWrite {
    #[serde(rename = "Shuffle Bytes Written")]
    bytes: i64,
    #[serde(rename = "Shuffle Write Time")]
    time: i64,
    #[serde(rename = "Shuffle Records Written")]
    records: i64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Input {
    #[serde(rename = "Bytes Read")]
    bytes: i64,
    #[serde(rename = "Records Read")]
    records: i64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Metrics {
    #[serde(rename = "Executor Deserialize Time")]
    deser: i64,
    #[serde(rename = "Executor Deserialize CPU Time")]
    deser_cpu: i64,
    #[serde(rename = "Executor Run Time")]
    run: i64,
    #[serde(rename = "Executor CPU Time")]
    cpu: i64,
    #[serde(rename = "Result Size")]
    result_size: i64,
    #[serde(rename = "JVM GC Time")]
    gc: i64,
    #[serde(rename = "Result Serialization Time")]
    result_ser: i64,
    #[serde(rename = "Memory Bytes Spilled")]
    mem_spill: i64,
    #[serde(rename = "Disk Bytes Spilled")]
    disk_spill: i64,
    #[serde(rename = "Shuffle Read Metrics")]
    sr: Option<ShuffleRead>,
    #[serde(rename = "Shuffle Write Metrics")]
    sw: Option<ShuffleWrite>,
    #[serde(rename = "Input Metrics")]
    inp: Option<Input>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TaskEnd {
    #[serde(rename = "Stage ID")]
    stage: i64,
    #[serde(rename = "Stage Attempt ID")]
    stage_attempt: i64,
    #[serde(rename = "Task End Reason")]
    reason: Option<Reason>,
    #[serde(rename = "Task Info")]
    info: Option<Info>,
    #[serde(rename = "Task Metrics")]
    metrics: Option<Metrics>,
}

/// One column's values.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Bool(Vec<bool>),
    Str(Vec<String>),
}

/// The task-row columns, in the order and with the names of the Python `TaskRow`.
pub const COLUMNS: [&str; 35] = [
    "stage_id",
    "stage_attempt",
    "task_id",
    "task_index",
    "attempt",
    "executor_id",
    "host",
    "launch_at_ms",
    "finish_at_ms",
    "duration_ms",
    "successful",
    "end_reason",
    "executor_run_ms",
    "executor_cpu_ms",
    "deserialize_ms",
    "deserialize_cpu_ms",
    "gc_ms",
    "result_serialization_ms",
    "result_bytes",
    "memory_spilled_bytes",
    "disk_spilled_bytes",
    "input_bytes",
    "input_records",
    "fetch_wait_ms",
    "remote_blocks",
    "local_blocks",
    "remote_bytes",
    "remote_bytes_to_disk",
    "local_bytes",
    "shuffle_records_read",
    "remote_reqs_duration_ms",
    "shuffle_write_bytes",
    "shuffle_write_records",
    "shuffle_write_ms",
    "speculative",
];

/// Task rows as columns (see [`COLUMNS`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    pub cols: Vec<Values>,
    pub len: usize,
}

fn kind(name: &str) -> Values {
    match name {
        "executor_id" | "host" | "end_reason" => Values::Str(Vec::new()),
        "successful" | "speculative" => Values::Bool(Vec::new()),
        "duration_ms"
        | "executor_run_ms"
        | "executor_cpu_ms"
        | "deserialize_ms"
        | "deserialize_cpu_ms"
        | "gc_ms"
        | "result_serialization_ms"
        | "fetch_wait_ms"
        | "remote_reqs_duration_ms"
        | "shuffle_write_ms" => Values::Float(Vec::new()),
        _ => Values::Int(Vec::new()),
    }
}

/// One row's values, in [`COLUMNS`] order.
pub enum Value {
    I(i64),
    F(f64),
    B(bool),
    S(String),
}

fn row_of(ev: TaskEnd) -> [Value; 35] {
    use Value::{B, F, I, S};
    let info = ev.info.unwrap_or_default();
    let m = ev.metrics.unwrap_or_default();
    let sr = m.sr.unwrap_or_default();
    let sw = m.sw.unwrap_or_default();
    let inp = m.inp.unwrap_or_default();
    let reason = ev.reason.map(|r| r.reason).unwrap_or_default();
    let (launch, finish) = (info.launch, info.finish);
    // as Python's float(finish - launch): the exact difference, rounded once
    let duration = if finish != 0 {
        (i128::from(finish) - i128::from(launch)) as f64
    } else {
        0.0
    };
    let successful = reason == "Success" && !info.failed;
    [
        I(ev.stage),
        I(ev.stage_attempt),
        I(info.task_id),
        I(info.index),
        I(info.attempt),
        S(info.executor),
        S(info.host),
        I(launch),
        I(finish),
        F(duration),
        B(successful),
        S(reason),
        F(m.run as f64),
        F(m.cpu as f64 / NS_PER_MS),
        F(m.deser as f64),
        F(m.deser_cpu as f64 / NS_PER_MS),
        F(m.gc as f64),
        F(m.result_ser as f64),
        I(m.result_size),
        I(m.mem_spill),
        I(m.disk_spill),
        I(inp.bytes),
        I(inp.records),
        F(sr.fetch_wait as f64),
        I(sr.remote_blocks),
        I(sr.local_blocks),
        I(sr.remote_bytes),
        I(sr.remote_to_disk),
        I(sr.local_bytes),
        I(sr.records),
        F(sr.reqs_duration as f64),
        I(sw.bytes),
        I(sw.records),
        F(sw.time as f64 / NS_PER_MS),
        B(info.speculative),
    ]
}

/// One task-end line decoded into its row; None when the line does not fit (the Python path decides).
pub fn task_row(line: &[u8]) -> Option<[Value; 35]> {
    serde_json::from_slice::<TaskEnd>(line).ok().map(row_of)
}

impl Default for Columns {
    fn default() -> Self {
        Columns {
            cols: COLUMNS.iter().map(|c| kind(c)).collect(),
            len: 0,
        }
    }
}

impl Columns {
    /// Append one row (values in [`COLUMNS`] order, of the column's kind).
    pub fn push(&mut self, row: [Value; 35]) {
        for (col, v) in self.cols.iter_mut().zip(row) {
            match (col, v) {
                (Values::Int(c), Value::I(x)) => c.push(x),
                (Values::Float(c), Value::F(x)) => c.push(x),
                (Values::Bool(c), Value::B(x)) => c.push(x),
                (Values::Str(c), Value::S(x)) => c.push(x),
                _ => unreachable!("a row's values follow COLUMNS"),
            }
        }
        self.len += 1;
    }

    /// Decode every line; None when any of them does not fit.
    pub fn decode<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Option<Columns> {
        let mut out = Columns::default();
        for line in lines {
            out.push(task_row(line)?);
        }
        Some(out)
    }

    pub fn column(&self, name: &str) -> Option<&Values> {
        COLUMNS
            .iter()
            .position(|c| *c == name)
            .map(|i| &self.cols[i])
    }

    /// Rows as CSV: integers in decimal, floats in the shortest form that reads back to the same
    /// double, booleans as `true`/`false`, every string quoted (a `"` doubled) so an empty string
    /// is not a missing value. One row a line, no header. Returns the longest line's length in
    /// bytes (its newline included).
    pub fn write_csv<W: Write>(&self, w: &mut W) -> io::Result<usize> {
        let mut longest = 0;
        for i in 0..self.len {
            let mut n = 0;
            for (j, col) in self.cols.iter().enumerate() {
                if j > 0 {
                    w.write_all(b",")?;
                    n += 1;
                }
                match col {
                    Values::Int(c) => {
                        let text = c[i].to_string();
                        n += text.len();
                        w.write_all(text.as_bytes())?;
                    }
                    Values::Float(c) => {
                        let text = format!("{:?}", c[i]);
                        n += text.len();
                        w.write_all(text.as_bytes())?;
                    }
                    Values::Bool(c) => {
                        let text: &[u8] = if c[i] { b"true" } else { b"false" };
                        n += text.len();
                        w.write_all(text)?;
                    }
                    Values::Str(c) => {
                        w.write_all(b"\"")?;
                        let s = c[i].as_bytes();
                        let mut start = 0;
                        for at in memchr::memchr_iter(b'"', s) {
                            w.write_all(&s[start..=at])?;
                            w.write_all(b"\"")?;
                            n += 1;
                            start = at + 1;
                        }
                        w.write_all(&s[start..])?;
                        w.write_all(b"\"")?;
                        n += s.len() + 2;
                    }
                }
            }
            w.write_all(b"\n")?;
            longest = longest.max(n + 1);
        }
        Ok(longest)
    }
}

/// A chunk of a log split into lines, as the Python path splits it (`chunk.split(b"\n")`, the
/// part after the last newline kept for the next chunk): task ends decoded, task starts counted,
/// every other line handed back. Ranges are byte offsets into the chunk.
pub struct Scan {
    pub others: Vec<(usize, usize)>,
    pub starts: usize,
    /// task starts that are not visibly whole (do not end in `}` with as many `{` as `}`)
    pub odd_starts: Vec<(usize, usize)>,
    pub ends: Vec<(usize, usize)>,
    /// the task ends decoded; None when a line does not fit
    pub columns: Option<Columns>,
    pub last: (usize, usize),
}

fn balanced(line: &[u8]) -> bool {
    line.last() == Some(&b'}')
        && memchr::memchr_iter(b'{', line).count() == memchr::memchr_iter(b'}', line).count()
}

pub fn scan(data: &[u8]) -> Scan {
    let mut s = Scan {
        others: Vec::new(),
        starts: 0,
        odd_starts: Vec::new(),
        ends: Vec::new(),
        columns: None,
        last: (0, 0),
    };
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', data) {
        let line = &data[start..nl];
        if line.starts_with(TASK_END) {
            s.ends.push((start, nl));
        } else if line.starts_with(TASK_START) {
            s.starts += 1;
            if !balanced(line) {
                s.odd_starts.push((start, nl));
            }
        } else {
            s.others.push((start, nl));
        }
        start = nl + 1;
    }
    s.last = (start, data.len());
    s.columns = Columns::decode(s.ends.iter().map(|&(a, b)| &data[a..b]));
    s
}

/// The keys of a task end's top level, of its `Task Info` and of its `Task Metrics` (None when
/// that is not an object), for counting fields this version does not know. Repeated keys are
/// listed as often as they appear; for a repeated `Task Info` or `Task Metrics` the last counts.
pub type EventKeys = (Vec<String>, Option<Vec<String>>, Option<Vec<String>>);

struct TopKeys(EventKeys);
struct MaybeKeys(Option<Vec<String>>);

impl<'de> Deserialize<'de> for MaybeKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MaybeKeys;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MaybeKeys, A::Error> {
                let mut keys = Vec::new();
                while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    keys.push(k.into_owned());
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(MaybeKeys(Some(keys)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MaybeKeys, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeKeys(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<MaybeKeys, E> {
                Ok(MaybeKeys(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<MaybeKeys, E> {
                Ok(MaybeKeys(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<MaybeKeys, E> {
                Ok(MaybeKeys(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<MaybeKeys, E> {
                Ok(MaybeKeys(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<MaybeKeys, E> {
                Ok(MaybeKeys(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<MaybeKeys, E> {
                Ok(MaybeKeys(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for TopKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopKeys;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopKeys, A::Error> {
                let (mut keys, mut info, mut metrics) = (Vec::new(), None, None);
                while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match k.as_ref() {
                        "Task Info" => info = map.next_value::<MaybeKeys>()?.0,
                        "Task Metrics" => metrics = map.next_value::<MaybeKeys>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                    keys.push(k.into_owned());
                }
                Ok(TopKeys((keys, info, metrics)))
            }
        }
        d.deserialize_map(V)
    }
}

/// The keys of one task-end line (see [`EventKeys`]); None when it is not a JSON object.
pub fn event_keys(line: &[u8]) -> Option<EventKeys> {
    serde_json::from_slice::<TopKeys>(line).ok().map(|k| k.0)
}

#[cfg(feature = "python")]
mod python;

#[cfg(test)]
mod tests {
    use super::*;

    const END: &str = r#"{"Event":"SparkListenerTaskEnd","Stage ID":3,"Stage Attempt ID":0,"Task Type":"ResultTask","Task End Reason":{"Reason":"Success"},"Task Info":{"Task ID":7,"Index":2,"Attempt":0,"Partition ID":2,"Launch Time":1000,"Executor ID":"1","Host":"w\"1","Locality":"ANY","Speculative":false,"Getting Result Time":0,"Finish Time":1500,"Failed":false,"Killed":false,"Accumulables":[{"ID":1,"Value":2.5e3}]},"Task Metrics":{"Executor Run Time":400,"Executor CPU Time":123456789,"Shuffle Read Metrics":{"Remote Bytes Read":10,"Fetch Wait Time":5},"Shuffle Write Metrics":{"Shuffle Bytes Written":99,"Shuffle Write Time":2000000}}}"#;

    fn get(c: &Columns, name: &str) -> Values {
        c.column(name).unwrap().clone()
    }

    #[test]
    fn a_task_end_becomes_a_row() {
        let c = Columns::decode([END.as_bytes()]).unwrap();
        assert_eq!(c.len, 1);
        assert_eq!(get(&c, "task_id"), Values::Int(vec![7]));
        assert_eq!(get(&c, "host"), Values::Str(vec!["w\"1".into()]));
        assert_eq!(get(&c, "duration_ms"), Values::Float(vec![500.0]));
        assert_eq!(get(&c, "successful"), Values::Bool(vec![true]));
        assert_eq!(get(&c, "executor_cpu_ms"), Values::Float(vec![123.456789]));
        assert_eq!(get(&c, "shuffle_write_ms"), Values::Float(vec![2.0]));
        assert_eq!(get(&c, "remote_bytes"), Values::Int(vec![10]));
        assert_eq!(get(&c, "input_bytes"), Values::Int(vec![0])); // absent: the default
    }

    #[test]
    fn a_line_that_does_not_fit_is_left_to_the_caller() {
        for bad in [
            END.replace("\"Index\":2", "\"Index\":2.0"),
            END.replace("\"Index\":2", "\"Index\":null"),
            END.replace("\"Index\":2", "\"Index\":99999999999999999999"),
            END.replace("\"Index\":2", "\"Index\":2,\"Index\":3"),
            END[..END.len() - 1].to_string(),
        ] {
            assert!(task_row(bad.as_bytes()).is_none(), "{bad}");
            assert!(Columns::decode([END.as_bytes(), bad.as_bytes()]).is_none());
        }
    }

    #[test]
    fn csv_quotes_every_string_and_keeps_floats_exact() {
        let line = END.replace("\"Executor ID\":\"1\"", "\"Executor ID\":\"\"");
        let c = Columns::decode([line.as_bytes()]).unwrap();
        let mut out = Vec::new();
        let longest = c.write_csv(&mut out).unwrap();
        assert_eq!(longest, out.len()); // one row
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(
            "3,0,7,2,0,\"\",\"w\"\"1\",1000,1500,500.0,true,\"Success\",400.0,123.456789,"
        ));
        assert!(text.ends_with(",false\n"));
        assert_eq!(text.matches(',').count(), 34); // 35 values
    }

    #[test]
    fn a_chunk_is_split_as_python_splits_it() {
        let start = r#"{"Event":"SparkListenerTaskStart","Stage ID":3}"#;
        let torn = r#"{"Event":"SparkListenerTaskStart","Stage ID":3"#;
        let data =
            format!("{start}\n{END}\n{{\"Event\":\"Other\"}}\n\n{torn}\n{END}\n{{\"Event\":\"Sp");
        let s = scan(data.as_bytes());
        assert_eq!(s.starts, 2);
        assert_eq!(s.odd_starts.len(), 1);
        assert_eq!(s.others.len(), 2); // the other event and the empty line
        assert_eq!(s.ends.len(), 2);
        assert_eq!(s.columns.unwrap().len, 2);
        assert_eq!(&data.as_bytes()[s.last.0..s.last.1], b"{\"Event\":\"Sp");
    }

    #[test]
    fn keys_of_the_three_levels() {
        let (top, info, metrics) = event_keys(END.as_bytes()).unwrap();
        assert_eq!(top[0], "Event");
        assert!(info.unwrap().contains(&"Accumulables".to_string()));
        assert!(metrics
            .unwrap()
            .contains(&"Shuffle Read Metrics".to_string()));
        let null_info = END.replace("\"Task Info\":{", "\"Task Info\":null,\"X\":{");
        assert!(event_keys(null_info.as_bytes()).unwrap().1.is_none());
    }
}
