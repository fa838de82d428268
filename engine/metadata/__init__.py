"""Apache Hudi's metadata table (`.hoodie/metadata/`): its records (`records`), reading it as of
the data timeline (`reader`), and a table's file listing from it (`listing`)."""
