"""Navigation for the browser tests that survives a network change made by another test on the same host.

Chromium abandons a navigation with ERR_NETWORK_CHANGED when any interface of its network namespace changes, and the
end-to-end suites running beside the browser tests add and remove veth pairs (their network namespaces' host ends).
Such a navigation is made again after a pause (Chromium treats the network as changing for a moment after the
event), a bounded number of times; any other outcome, error or page, is the test's to judge.
"""

import time

from selenium.common.exceptions import WebDriverException

NETWORK_CHANGED = "ERR_NETWORK_CHANGED"


def load(driver, url, attempts=5, pause=1.0):
    """Navigates to `url` and returns the page's source, or the net error chromedriver reports for a navigation that
    failed (a failed TLS handshake ends it with an error rather than an error page). Other WebDriver errors (a page
    load timeout, a browser that died) are raised, as `driver.get` raises them."""
    outcome = ""
    for attempt in range(attempts):
        if attempt:
            time.sleep(pause)
        try:
            driver.get(url)
            outcome = driver.page_source
        except WebDriverException as error:
            if "net::ERR_" not in str(error):
                raise
            outcome = str(error)
        if NETWORK_CHANGED not in outcome:
            return outcome
    return outcome
