"""What user code defines: tasks, workflows, messages, children and their context."""
