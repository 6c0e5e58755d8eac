"""Human labels: collecting, storing and exporting per-annotator labels of a stage's rows."""
