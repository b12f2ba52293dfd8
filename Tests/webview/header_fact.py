#!/usr/bin/env python3
"""Usage: header_fact.py URL ELEMENT_ID TEXT. Run by end-to-end tests (Tests/ProxyEndToEndTests) that check one
thing the web view shows: opens URL in headless Chromium (Selenium, chromedriver) and waits, at most 20 s, until
the element ELEMENT_ID is shown and its text contains TEXT. Exits 0 then; else prints what the element said and
exits 1. The browser is always stopped.
"""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

import navigation

if len(sys.argv) != 4 or sys.argv[1] in ("-h", "--help"):
    sys.exit(__doc__)
url, element_id, expected = sys.argv[1:]

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-proxy-server"):
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
try:
    driver.set_page_load_timeout(30)
    navigation.load(driver, url)
    shown = ""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        elements = driver.find_elements(By.ID, element_id)
        shown = elements[0].text if elements and elements[0].is_displayed() else ""
        if expected in shown:
            print("ok   #%s: %s" % (element_id, shown))
            sys.exit(0)
        time.sleep(0.1)
    print("#%s says %r, not %r" % (element_id, shown, expected))
    sys.exit(1)
finally:
    driver.quit()
