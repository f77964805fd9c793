"""Tools beside the method: building the offline models (tiny_models, pretraining: the mini generator) and
measuring it (gpu_check, gpu_measure, benchmark, stage_costs, generation_quality): figures go under results/."""
