"""Data files: the layer below index/, read/, write/ and services/.

Owns reading base files and their footers (`base_file`), the internal column names the write and
read pipelines add to records (`columns`), record-key scans of single files (`keys`), and the
merge-on-read data path: the log-block codec (`log_block`, `delete_records`), log files through
Storage (`log_file`) and the file-slice reader that merges a base file with its log files
(`slice_reader`, rules in `log_merge`). Pure pyarrow: no Spark here, so the modules run inside Spark
tasks, on the driver and in the console.
"""
