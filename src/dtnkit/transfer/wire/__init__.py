"""Sans-I/O protocol pieces of the HTTP data mover: text and bytes in, values out.

Nothing here opens a socket or a file: digests (RFC 3230/9530), byte ranges and conditional
requests, WebDAV multistatus, upload-session headers and range bookkeeping, TPC markers.
"""
