"""Table layout: file names, file groups and slices, the file-system view, commit metadata, schemas."""
