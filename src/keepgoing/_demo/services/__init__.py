"""The side services the demo's use cases launch as processes of their own: a fake CRM
(``crm``) and a batch system (``jobs``). Kept apart from the use cases, so that
``python -m keepgoing._demo.services.crm`` imports nothing else of the demo."""
