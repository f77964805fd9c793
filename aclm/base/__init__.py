"""The shared base every other package stands on: where the project is (paths), the typed config and its
plain values (config, dicts), where models are (models), which layers S2 reads (layers), atomic file writes
(io), tagged sentences and CoNLL files (data), the dataset registry (datasets), the method table
(registry), seeds and devices (runtime), signals, logs, progress bars, new tokens, seqeval scores
(metrics), low-resource samples (splits) and what a method receives and returns (augmentation).
Nothing here imports another package of ``aclm``."""
