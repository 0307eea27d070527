"""Transfer: checksums, digests, the HTTP server and client."""
