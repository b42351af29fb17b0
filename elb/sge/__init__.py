"""Reading SGE: the only place that runs SGE commands, and the parsers of their XML."""
