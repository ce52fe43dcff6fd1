"""The findings and reports: run records collected into tables, plots, dashboards and findings READMEs. Imports
the catalogue, the verdicts and the engine; never the runner."""
