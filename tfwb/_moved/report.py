"""``tfwb.report`` moved to ``tfwb.render`` in tfwb 0.3; this name imports it, with a warning, until 0.4."""
from tfwb.renamed import serve

serve(__name__)
