"""The interactive simulator: a FastAPI app over the engine and its static page.

``qkv serve`` (``qkv.cli.serve.serve``) runs it; ``create_app()`` builds the app.
Needs the ``web`` extra (fastapi, uvicorn).
"""
