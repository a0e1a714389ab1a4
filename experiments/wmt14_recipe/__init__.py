"""docs/own-data.md's WMT14 recipe, run end to end on the generated corpus (issue 55)."""
