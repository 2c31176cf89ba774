"""Words and pictures of a trace: the walkthrough, text/Markdown/rich formats, heatmaps, the
notebook HTML, the built-in scenes and the sizes of a configuration (``dims``)."""
