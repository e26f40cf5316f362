//! A zone's timeline as an SVG picture, rendered on the server.
