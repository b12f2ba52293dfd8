"""Usage: python3 onboarding_screenshot.py PROXY_PORT PNG FULL_PNG. Run by DeviceTests (Tests/ProxyEndToEndTests),
with the Selenium of .venv-test.

Loads the set-up page http://atsproxy.invalid/ through the proxy in headless Chromium at 390x844, saves a screenshot
of the viewport (PNG) and of the whole page (FULL_PNG), and prints the title and whether the page fits the width.
"""
import sys

if __name__ == "__main__" and (len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
          "--proxy-server=http://127.0.0.1:" + sys.argv[1]]:
    options.add_argument(a)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
def viewport(height):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 390, "height": height, "deviceScaleFactor": 1, "mobile": True})
try:
    driver.set_page_load_timeout(30)
    viewport(844)
    driver.get("http://atsproxy.invalid/")
    width = driver.execute_script("return document.documentElement.scrollWidth")
    inner = driver.execute_script("return window.innerWidth")
    title = driver.title
    driver.save_screenshot(sys.argv[2])
    # The whole page too, for a look at every section.
    viewport(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.save_screenshot(sys.argv[3])
    print(title, "|", inner, "fits" if width <= inner else "overflows %d > %d" % (width, inner))
finally:
    driver.quit()
