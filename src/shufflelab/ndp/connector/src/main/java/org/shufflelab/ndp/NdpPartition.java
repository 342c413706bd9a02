package org.shufflelab.ndp;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One Parquet file (at most one HDFS block, so one pushdown) and the proxy that serves it. Every
 * storage host holds every block, so any proxy can; files are spread over them round-robin.
 *
 * @param length the file's size from the listing (-1: unknown), checked after whole-file reads
 */
record NdpPartition(String path, long length, String proxy) implements InputPartition {}
