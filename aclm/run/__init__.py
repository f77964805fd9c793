"""The run machinery: cached stages (stages), the run directory (layout) and the one reader of each
stage's files (outputs); the stages themselves: gold (S0), tagging (S1, S7 and their scores) and
pipeline (S2-S6, a baseline's augment stage); each method's chain as data and the loop that runs it
(chain); the NER tagger (tagger), the data check every run makes first (datacheck) and the scripts'
shared command line (cli)."""
