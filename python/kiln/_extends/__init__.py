"""kiln._extends -- where MindSpore code finds its compiler switches (parse.compile_config)."""
