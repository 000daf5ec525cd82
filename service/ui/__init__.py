"""The dashboard's static files (``static/``), served at ``/ui`` by service/api/ui.py.

Everything the browser loads is in this folder — the dashboard's own HTML, CSS and JavaScript and
the vendored Swagger UI and ReDoc bundles under ``static/vendor/`` with their licenses — so no
page of the service makes a request outside it.
"""
