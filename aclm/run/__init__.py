"""The run machinery: cached stages (stages), the run directory (layout), the stages themselves
(experiment: S0, S1, S7 and scoring; pipeline: S2-S6 and a baseline's augment stage), each method's
chain (chain), the NER tagger (tagger), the data check (datacheck) and the scripts' shared command line
(cli)."""
