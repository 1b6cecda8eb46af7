"""Headless Chromium from Debian's packages, driven by Selenium through Debian's chromedriver."""

from __future__ import annotations

import shutil
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from support.binaries import require_binaries

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1360,900",
)


class Browser:
    """A fresh Chromium profile per browser; ``quit`` removes it."""

    def __init__(self) -> None:
        found = require_binaries("chromium", "chromedriver")
        self.profile = tempfile.mkdtemp(prefix="relayd-chromium-")
        options = Options()
        options.binary_location = found["chromium"]
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self.profile}")
        # Both paths given: Selenium Manager has nothing to look up or download.
        self.driver = webdriver.Chrome(
            service=Service(executable_path=found["chromedriver"]), options=options
        )
        self.driver.set_page_load_timeout(60)

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
