"""What a run leaves behind and where it is kept: compile artifacts that warm runs load, profiler traces and the
compile's TORCH_TRACE (artifacts), the model card of a model file (model_cards), tlparse's rendered reports (tlparse),
and results stored before today's figures, rewritten once (stored_results).
"""
