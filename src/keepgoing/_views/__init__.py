"""Read-side views of runs over the store protocol, shared by the client, the server
and the CLI: the steps fold, the catalog, batches, queues, operation status and what a
run waits for."""
