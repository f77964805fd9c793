"""Tools beside the method: building the offline models (tiny_models, pretraining: the mini generator) and
measuring the method (gpu_check with gpu_measure, benchmark, stage_costs, generation_quality).  Each script here writes its figures under results/, never into docs/."""
