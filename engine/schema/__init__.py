"""Schemas (pure): Avro <-> Arrow (`avro`: the one type map, meta fields, normalisation for writing),
schema evolution on write (`evolution`: the rules a batch's schema meets the table's by), explicit
changes (`changes`: rename, drop, move, widen), and Apache Hudi's internal schema with column ids
(`internal`: schema on read). Below table, data, read and write, which all use it."""
