"""The live page in a real headless browser (Debian's chromium, driven by Selenium):
it logs in, shows a queue declared over AMQP, follows a publish, and shows the
queue's new leader once the old leader's node is killed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.broker.broker_support import BrokerProc, running_cluster

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT_S = 90


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options,
                              service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def management_port(b: BrokerProc) -> int:
    return int(json.loads((b.data_dir / "ready").read_text())["management_port"])


def open_page(driver: webdriver.Chrome, b: BrokerProc) -> None:
    driver.get(f"http://127.0.0.1:{management_port(b)}/")
    until(driver, lambda d: d.find_element(By.ID, "login").is_displayed())
    driver.find_element(By.ID, "username").send_keys("guest")
    driver.find_element(By.ID, "password").send_keys("guest")
    driver.find_element(By.CSS_SELECTOR, "#login button").click()
    until(driver, lambda d: d.find_element(By.ID, "app").is_displayed())


def until(driver: webdriver.Chrome, check: Any) -> Any:
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(check)


# The page redraws its tables every second: each read below is one script, so it
# never holds an element across a redraw.
def queue_cell(driver: webdriver.Chrome, queue: str, cls: str) -> str:
    return str(driver.execute_script(
        "const row = document.querySelector(`tr.queue[data-queue='${arguments[0]}']`);"
        "return row ? row.querySelector('.' + arguments[1]).textContent : '';", queue, cls))


def click_queue(driver: webdriver.Chrome, queue: str) -> None:
    driver.execute_script(
        "document.querySelector(`tr.queue[data-queue='${arguments[0]}']`).click();", queue)


def member_states(driver: webdriver.Chrome) -> list[str]:
    return list(driver.execute_script(
        "return [...document.querySelectorAll('#members .raft-state')]"
        ".map(td => td.textContent);"))


def test_the_page_follows_a_queue_through_a_publish_and_a_leader_kill(
        tmp_path: Path, browser: webdriver.Chrome) -> None:
    with running_cluster(tmp_path, count=3) as nodes:
        open_page(browser, nodes[0])
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", nodes[1].amqp_port, connection_attempts=1))
        try:
            ch = conn.channel()
            ch.queue_declare("page-q", durable=True, arguments={"x-queue-type": "quorum"})
            until(browser, lambda d: queue_cell(d, "page-q", "leader") != "")
            assert queue_cell(browser, "page-q", "messages") == "0"
            ch.confirm_delivery()
            ch.basic_publish("", "page-q", b"hello")
            until(browser, lambda d: queue_cell(d, "page-q", "messages") == "1")
        finally:
            conn.close()
        leader = queue_cell(browser, "page-q", "leader")
        killed = next(b for b in nodes if b.name == leader)
        watcher = next(b for b in nodes if b is not killed)
        if watcher is not nodes[0]:  # the page's own node is the leader: watch another
            open_page(browser, watcher)
        click_queue(browser, "page-q")
        until(browser, lambda d: len(member_states(d)) == 3)
        assert killed.proc is not None
        killed.proc.kill()
        killed.proc.wait()
        new = until(browser, lambda d: (lambda text: text not in ("", leader) and text)(
            queue_cell(d, "page-q", "leader")))
        assert new in {b.name for b in nodes} - {leader}
        until(browser, lambda d: "leader" in member_states(d))


def test_the_page_shows_a_classic_queue_on_its_node_with_no_ra_members(
        tmp_path: Path, browser: webdriver.Chrome) -> None:
    with running_cluster(tmp_path, count=1) as nodes:
        open_page(browser, nodes[0])
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", nodes[0].amqp_port, connection_attempts=1))
        try:
            ch = conn.channel()
            ch.queue_declare("page-classic", durable=True)
            ch.confirm_delivery()
            ch.basic_publish("", "page-classic", b"hello")
            until(browser, lambda d: queue_cell(d, "page-classic", "messages") == "1")
        finally:
            conn.close()
        assert queue_cell(browser, "page-classic", "leader") == nodes[0].name
        assert queue_cell(browser, "page-classic", "members") == nodes[0].name
        assert browser.execute_script(
            "return document.querySelector(`tr.queue[data-queue='page-classic']`)"
            ".children[2].textContent;") == "classic"
        click_queue(browser, "page-classic")
        until(browser, lambda d: d.execute_script(
            "return document.querySelector(`tr.queue[data-queue='page-classic']`)"
            " !== null;"))
        assert member_states(browser) == []
        assert browser.find_element(By.ID, "members-of").text == "(pick a quorum queue)"
