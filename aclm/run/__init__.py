"""How a run is driven: each method's chain of stages as data and the loop that runs it (chain), the data
check every run makes first (datacheck), folders named after a run's overrides (naming) and the scripts'
shared command line (cli).  The stages are :mod:`aclm.stages`; their cache, :mod:`aclm.engine`."""
