"""Python's stdlib http.server.HTTPServer (not Threading) speaking HTTP/1.1
keep-alive: it serves one connection at a time, reading it until the peer
closes it, while the others wait in its listen queue.

    python3 single_threaded_backend.py BACKLOG

prints the port once listening. BACKLOG is the listen queue (the stdlib's
default is 5; past it the kernel drops SYNs and connects wait for
retransmits, 1 s then 3 s, which is the kernel's, not the pool's doing)."""

import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b"single\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

    def log_error(self, *args):
        pass


class Server(HTTPServer):
    request_queue_size = int(sys.argv[1]) if len(sys.argv) > 1 else 5

    def handle_error(self, request, client_address):
        pass  # a proxy that closes its end mid-answer is no news


if __name__ == "__main__":
    s = Server(("127.0.0.1", 0), Handler)
    print(s.server_address[1], flush=True)
    s.serve_forever()
