"""Data files: the layer below index/, read/, write/ and services/.

Owns reading base files and their footers (`base_file`), the internal column names the write and
read pipelines add to records (`columns`), and record-key scans of single files (`keys`). Pure
pyarrow: no Spark here, so the modules run inside Spark tasks, on the driver and in the console.
"""
