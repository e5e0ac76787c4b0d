"""``tfwb.tuning`` moved to ``tfwb.search.tune_loop`` in tfwb 0.3; this name imports it, with a warning, until 0.4."""
from tfwb.renamed import serve

serve(__name__)
