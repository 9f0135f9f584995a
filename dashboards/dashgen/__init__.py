"""The source of rag-confidence's dashboards and alert rules (run ``dashboards/generate.py``)."""
