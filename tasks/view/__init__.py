"""The per-sample viewer (`frame view`): a static HTML site of one `frame score` output folder.

Pure rendering: `load.load_run` reads the run (scores, evidence, leaderboard, the release's S and Y, each
system's reports), `site.write_site` writes the pages (index, one per system, one per instance, diffs).
Reports are untrusted: every text is escaped, Markdown is rendered without raw HTML, links and images
become text, and each page forbids scripts other than its own and any network access (a CSP).
"""
