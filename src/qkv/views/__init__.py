"""What a person looks at, computed once from a trace, a scene or a model's run: the selected
query's row and walkthrough (``selection``), the layers × heads grid (``grid``), and the view of
one object with the controls it offers (``viewers``: what ``qkv.show`` and ``qkv export``
draw). The page, the notebook widget and the HTML export all draw from here; this layer imports
no surface."""
