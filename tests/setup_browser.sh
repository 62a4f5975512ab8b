#!/bin/sh
# Headless chromium for tests/test_view_browser.py (`make test` runs this first). Installs Debian's
# chromium only where it is absent and this is root with apt-get; never fails the run: without a
# browser the browser tests skip and say why.
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup_browser: installing chromium (apt-get)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
        || echo "setup_browser: could not install chromium; the browser tests will skip"
else
    echo "setup_browser: no chromium and no root apt-get; the browser tests will skip"
fi
exit 0
