"""Models built here, offline: random-weight stand-ins of the paper's architectures (tiny_models) and a
small mBART-50 pretrained with mBART's denoising objective (pretraining)."""
