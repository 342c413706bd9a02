package org.shufflelab.ndp;

import java.math.BigDecimal;
import java.math.RoundingMode;

import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.vectorized.ColumnVector;

/**
 * Gives Spark a column in the type the scan declared. Usually the incoming column already has it
 * and is passed through untouched (zero copy). It differs where the producer chose its own type:
 * DuckDB sums integers into HUGEINT (Arrow decimal(38,0)) and gives decimal arithmetic its own
 * precision, and a Parquet file may store a narrower integer than the table declares. Such a
 * column is copied into an on-heap vector, converting each value exactly (never rounding: a
 * value that does not fit fails the task with the column's name).
 */
final class VectorAdapter implements AutoCloseable {
  private final String column;
  private final DataType target;
  private OnHeapColumnVector out;

  VectorAdapter(String column, DataType target) {
    this.column = column;
    this.target = target;
  }

  ColumnVector adapt(ColumnVector in, int rows) {
    DataType src = in.dataType();
    if (src.equals(target)) {
      return in;
    }
    if (out == null) {
      out = new OnHeapColumnVector(Math.max(rows, 1), target);
    } else {
      out.reset();
      out.reserve(rows); // grows only: one vector serves every batch of the reader
    }
    try {
      for (int r = 0; r < rows; r++) {
        if (in.isNullAt(r)) {
          out.putNull(r);
        } else {
          put(in, src, r);
        }
      }
    } catch (ArithmeticException e) {
      throw new ArithmeticException("shufflelab-ndp: column " + column + ": a " + src.sql()
          + " value does not fit the declared " + target.sql() + " (" + e.getMessage() + ")");
    }
    return out;
  }

  private void put(ColumnVector in, DataType src, int r) {
    if (target instanceof DecimalType t) {
      BigDecimal v = exact(in, src, r).setScale(t.scale(), RoundingMode.UNNECESSARY);
      if (v.precision() > t.precision()) {
        throw new ArithmeticException(v.toPlainString() + " has more than " + t.precision() + " digits");
      }
      out.putDecimal(r, Decimal.apply(v, t.precision(), t.scale()), t.precision());
    } else if (target instanceof LongType) {
      out.putLong(r, exact(in, src, r).longValueExact());
    } else if (target instanceof IntegerType) {
      out.putInt(r, exact(in, src, r).intValueExact());
    } else if (target instanceof ShortType) {
      out.putShort(r, exact(in, src, r).shortValueExact());
    } else if (target instanceof ByteType) {
      out.putByte(r, exact(in, src, r).byteValueExact());
    } else if (target instanceof DoubleType) {
      out.putDouble(r, floating(in, src, r));
    } else if (target instanceof FloatType && src instanceof FloatType) {
      out.putFloat(r, in.getFloat(r));
    } else {
      throw unsupported(src);
    }
  }

  private BigDecimal exact(ColumnVector in, DataType src, int r) {
    if (src instanceof DecimalType d) {
      return in.getDecimal(r, d.precision(), d.scale()).toJavaBigDecimal();
    }
    if (src instanceof LongType) {
      return BigDecimal.valueOf(in.getLong(r));
    }
    if (src instanceof IntegerType) {
      return BigDecimal.valueOf(in.getInt(r));
    }
    if (src instanceof ShortType) {
      return BigDecimal.valueOf(in.getShort(r));
    }
    if (src instanceof ByteType) {
      return BigDecimal.valueOf(in.getByte(r));
    }
    throw unsupported(src);
  }

  private double floating(ColumnVector in, DataType src, int r) {
    if (src instanceof DoubleType) {
      return in.getDouble(r);
    }
    if (src instanceof FloatType) {
      return in.getFloat(r);
    }
    return exact(in, src, r).doubleValue();
  }

  private UnsupportedOperationException unsupported(DataType src) {
    return new UnsupportedOperationException("shufflelab-ndp: column " + column + " arrives as " + src.sql()
        + ", which cannot be read as the declared " + target.sql());
  }

  @Override
  public void close() {
    if (out != null) {
      out.close();
      out = null;
    }
  }
}
