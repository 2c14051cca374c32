#!/usr/bin/python3
"""Drives playd's web remote in headless Chromium (Debian's chromium, chromedriver and
python3-selenium) and checks every control's effect with `playctl status --json`, the
independent path over the Unix socket. Run by Tests/PlaydTests/WebRemoteTests.swift.

  remote.py controls URL --playctl P --socket S --music DIR --shots DIR
  remote.py security URL --password PW

Exits 0 when every check passed, 1 with the failed checks listed. Waits are hang guards
(20 s) on the state they wait for, never sleeps.
"""
import argparse
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import Select

failures = []
GUARD = 20.0


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def wait_for(predicate, what, guard=GUARD):
    """Polls `predicate` until it is true; a hang guard, not a speed bound."""
    end = time.monotonic() + guard
    last = None
    while time.monotonic() < end:
        try:
            last = predicate()
            if last:
                return check(True, what)
        except Exception as e:  # a page mid-redraw, a daemon mid-reply
            last = e
        time.sleep(0.05)
    return check(False, what + " (last: %r)" % (last,))


def browser(width, height):
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=%d,%d" % (width, height), "--force-device-scale-factor=1",
              # No sound card here: Chromium plays into its fake audio output.
              "--autoplay-policy=no-user-gesture-required"):
        o.add_argument(a)
    if width < 500:
        o.add_experimental_option("mobileEmulation", {
            "deviceMetrics": {"width": width, "height": height, "pixelRatio": 2.0, "touch": True},
            "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0 Mobile Safari/537.36"})
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=o)


class Daemon:
    def __init__(self, playctl, socket):
        self.playctl, self.socket = playctl, socket

    def run(self, *args):
        r = subprocess.run([self.playctl, "--socket", self.socket] + list(args), capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("playctl %s: %s" % (" ".join(args), r.stderr.strip()))
        return r.stdout

    def status(self):
        return json.loads(self.run("status", "--json"))

    def request(self, doc):
        """One JSON request on the control socket (the queue's entries, playlists)."""
        import socket as s
        c = s.socket(s.AF_UNIX, s.SOCK_STREAM)
        c.connect(self.socket)
        c.sendall((json.dumps(doc) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
        c.close()
        return json.loads(data)

    def queue(self):
        return self.request({"cmd": "queue"})["queue"]


def click(d, element_id):
    d.find_element(By.ID, element_id).click()


def click_row(d, list_id, row, button, expect_text=None):
    """Clicks a button of a list's row once the page shows it (with `expect_text` in the
    row, when given); a row redrawn meanwhile (an event arrived) is looked up again."""
    end = time.monotonic() + GUARD
    while True:
        try:
            li = d.find_elements(By.CSS_SELECTOR, "#%s li" % list_id)[row]
            if expect_text is None or expect_text in li.text:
                li.find_elements(By.TAG_NAME, "button")[button].click()
                return
        except Exception:
            if time.monotonic() > end:
                raise
        if time.monotonic() > end:
            raise RuntimeError("row %d of #%s never showed %r" % (row, list_id, expect_text))
        time.sleep(0.05)


def set_range(d, element_id, value):
    """What a finger lifting off a slider does: input, then change."""
    d.execute_script("""const e = document.getElementById(arguments[0]); e.value = arguments[1];
        e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true}));""",
                     element_id, str(value))


def tab(d, name):
    d.find_element(By.CSS_SELECTOR, ".tab[data-view='%s']" % name).click()
    wait_for(lambda: d.find_element(By.ID, "view-" + name).is_displayed(), "the %s view shows" % name)


def axe(d, view, axe_js):
    d.execute_script(axe_js)
    result = d.execute_async_script("""const done = arguments[arguments.length - 1];
        axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help})))).catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e)}]));""")
    serious = [v for v in result if v["impact"] in ("serious", "critical")]
    check(not serious, "axe-core: no serious or critical violations on the %s view %s" % (view, serious or ""))
    for v in result:
        if v not in serious:
            print("      (minor: %s, %s)" % (v["id"], v["help"]))


def shot(d, shots, name):
    if shots:
        os.makedirs(shots, exist_ok=True)
        d.save_screenshot(os.path.join(shots, name + ".png"))


def serve_stream(path):
    """A plain web server for the radio check: Python's own, on a free port."""
    directory = os.path.dirname(path)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=directory, **k)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d/%s" % (server.server_port, os.path.basename(path))


def controls(a):
    p = Daemon(a.playctl, a.socket)
    axe_js = open(a.axe).read()
    start_queue = p.queue()
    check(len(start_queue) == 3, "the queue starts with the album's 3 tracks")
    d = browser(390, 844)
    try:
        d.get(a.url)
        wait_for(lambda: d.find_element(By.ID, "link").text == "connected", "the page connects its event stream")
        wait_for(lambda: len(d.find_elements(By.CSS_SELECTOR, "#queue li")) == 3, "the page lists the queue")

        # Transport.
        click(d, "toggle")
        wait_for(lambda: p.status()["state"] == "playing", "Play starts playback")
        s = p.status()
        wait_for(lambda: d.find_element(By.ID, "title").text == s["title"], "the title shown is the track's (%s)" % s["title"])
        check(d.find_element(By.ID, "artist").text == s.get("artist"), "the artist shown is the track's")
        check(d.find_element(By.ID, "album").text == s.get("album"), "the album shown is the track's")
        wait_for(lambda: d.find_element(By.ID, "cover").is_displayed()
                 and d.execute_script("return document.getElementById('cover').naturalWidth") == 300,
                 "the cover image loads (300 px, the embedded picture)")
        check(not d.find_element(By.ID, "no-cover").is_displayed(), "the placeholder is hidden while a cover shows")
        shot(d, a.shots, "web-phone-now-playing")
        axe(d, "now playing", axe_js)
        wait_for(lambda: d.find_element(By.ID, "toggle").get_attribute("aria-label") == "Pause", "the button offers Pause while playing")
        click(d, "toggle")
        wait_for(lambda: p.status()["state"] == "paused", "Pause pauses")
        click(d, "toggle")
        wait_for(lambda: p.status()["state"] == "playing", "Play resumes")
        click(d, "next")
        wait_for(lambda: p.status()["queue"]["current"] == 1, "Next plays the second entry")
        wait_for(lambda: d.find_element(By.ID, "title").text == p.status()["title"], "the page follows to the next title")
        wait_for(lambda: not d.find_element(By.ID, "cover").is_displayed() and d.find_element(By.ID, "no-cover").is_displayed(),
                 "a track without a picture shows the placeholder, not the last cover")
        check(d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), "nothing runs off the side of the phone's screen")
        click(d, "prev")
        wait_for(lambda: p.status()["queue"]["current"] == 0, "Previous goes back to the first entry")

        # Seek and volume.
        set_range(d, "seek", 12)
        wait_for(lambda: 12 <= p.status()["position"] < 16, "the seek bar seeks to 12 s")
        set_range(d, "volume", 40)
        wait_for(lambda: p.status()["volume"] == 40, "the volume slider sets 40")

        # Modes.
        click(d, "repeat")
        wait_for(lambda: p.status()["queue"]["repeat"] == "on", "Repeat turns repeat on")
        click(d, "single")
        wait_for(lambda: p.status()["queue"]["single"] == "on", "Single turns single on")
        click(d, "repeat")
        wait_for(lambda: p.status()["queue"]["repeat"] == "off" and p.status()["queue"]["single"] == "on",
                 "Repeat off keeps single on")
        click(d, "single")
        wait_for(lambda: p.status()["queue"]["single"] == "off", "Single off")
        click(d, "random")
        wait_for(lambda: p.status()["queue"]["shuffle"] is True, "Random turns shuffle on")
        click(d, "random")
        wait_for(lambda: p.status()["queue"]["shuffle"] is False, "Random off")
        click(d, "consume")
        wait_for(lambda: p.status()["queue"]["consume"] is True, "Consume on")
        click(d, "consume")
        wait_for(lambda: p.status()["queue"]["consume"] is False, "Consume off")
        Select(d.find_element(By.ID, "crossfade")).select_by_value("3")
        wait_for(lambda: p.status()["crossfade"]["seconds"] == 3, "Crossfade 3 s")
        Select(d.find_element(By.ID, "crossfade")).select_by_value("0")
        wait_for(lambda: p.status()["crossfade"]["seconds"] == 0, "Crossfade off")

        # Listen on this device: the browser plays the daemon's stream.
        click(d, "listen")
        wait_for(lambda: d.execute_script("const a = document.getElementById('player'); return !a.paused && a.currentTime > 0.5"),
                 "Listen on this device plays the stream in the browser")
        wait_for(lambda: p.status()["listen"]["listeners"] == 1, "the daemon counts the browser as a listener")
        # A track change starts the Opus stream's next chain (its comments name the new
        # title): the browser plays on across it.
        t0 = d.execute_script("return document.getElementById('player').currentTime")
        p.run("next")
        wait_for(lambda: p.status()["queue"]["current"] == 1, "next, while the browser listens")
        wait_for(lambda: d.execute_script("const a = document.getElementById('player'); "
                                          "return !a.paused && !a.ended && !a.error && a.currentTime > %f" % (t0 + 3)),
                 "the browser plays on across the track change")
        click(d, "listen")
        wait_for(lambda: p.status()["listen"]["listeners"] == 0, "Stop listening here closes the stream")

        # Changes made elsewhere show without a reload.
        p.run("volume", "55")
        wait_for(lambda: d.find_element(By.ID, "volume").get_attribute("value") == "55", "playctl volume 55 shows on the page")
        p.run("pause")
        wait_for(lambda: d.find_element(By.ID, "state").text.startswith("paused"), "playctl pause shows on the page")
        p.run("resume")
        wait_for(lambda: d.find_element(By.ID, "state").text.startswith("playing"), "playctl resume shows on the page")

        # The queue.
        tab(d, "queue")
        shot(d, a.shots, "web-phone-queue")
        axe(d, "queue", axe_js)
        click_row(d, "queue", 2, 0, "Third Tone")
        wait_for(lambda: p.status()["queue"]["current"] == 2, "clicking the third entry plays it")
        q = p.queue()
        first, first_title = q[0]["entry"], q[0]["title"]
        click_row(d, "queue", 0, 2, first_title)
        wait_for(lambda: p.queue()[1]["entry"] == first, "Move down moves the first entry to second")
        click_row(d, "queue", 1, 1, first_title)
        wait_for(lambda: p.queue()[0]["entry"] == first, "Move up moves it back")
        click_row(d, "queue", 0, 3, first_title)
        wait_for(lambda: len(p.queue()) == 2 and all(e["entry"] != first for e in p.queue()), "Remove removes that entry")
        wait_for(lambda: len(d.find_elements(By.CSS_SELECTOR, "#queue li")) == 2, "the page shows the shorter queue")

        # The library: browse, add, search, play.
        tab(d, "library")
        wait_for(lambda: any("album" in b.text for b in d.find_elements(By.CSS_SELECTOR, "#results button.name")), "the roots list the album folder")
        [b for b in d.find_elements(By.CSS_SELECTOR, "#results button.name") if "album" in b.text][0].click()
        wait_for(lambda: len(d.find_elements(By.CSS_SELECTOR, "#results li")) >= 3, "the album folder lists its songs")
        shot(d, a.shots, "web-phone-library")
        axe(d, "library", axe_js)
        before = len(p.queue())
        add = [b for b in d.find_elements(By.CSS_SELECTOR, "#results button") if (b.get_attribute("aria-label") or "").startswith("Add ")][0]
        add.click()
        wait_for(lambda: len(p.queue()) == before + 1, "Add puts a song at the end of the queue")
        click(d, "browse-add")
        wait_for(lambda: len(p.queue()) == before + 4, "Add this folder adds the album's 3 songs")
        d.find_element(By.ID, "search").send_keys("Second")
        d.find_element(By.CSS_SELECTOR, "#search-form button").click()
        wait_for(lambda: len(d.find_elements(By.CSS_SELECTOR, "#results li")) == 1, "searching 'Second' finds one song")
        d.find_element(By.CSS_SELECTOR, "#results li button[aria-label^='Play']").click()
        wait_for(lambda: p.status().get("title") == "Second Tone" and p.status()["state"] == "playing", "its Play plays it")

        # Stored playlists.
        tab(d, "playlists")
        d.find_element(By.ID, "playlist-name").send_keys("evening")
        d.find_element(By.CSS_SELECTOR, "#save-form button").click()
        wait_for(lambda: any(x["name"] == "evening" for x in p.request({"cmd": "playlists"})["playlists"]), "Save stores the queue as 'evening'")
        wait_for(lambda: any(li.text.startswith("evening") for li in d.find_elements(By.CSS_SELECTOR, "#playlists li")), "the page lists 'evening'")
        axe(d, "playlists", axe_js)
        before = len(p.queue())
        d.find_element(By.CSS_SELECTOR, "#playlists li button[aria-label='Load playlist evening']").click()
        wait_for(lambda: len(p.queue()) == 2 * before, "Load appends the playlist's %d entries" % before)

        # Radio and announcements.
        tab(d, "radio")
        axe(d, "radio", axe_js)
        server, url = serve_stream(a.stream)
        d.find_element(By.ID, "radio-url").send_keys(url)
        d.find_element(By.CSS_SELECTOR, "#radio-form button").click()
        wait_for(lambda: p.status()["file"] == url and p.status()["state"] == "playing", "Play stream plays the URL")
        d.find_element(By.ID, "announce-source").send_keys(a.clip)
        d.find_element(By.CSS_SELECTOR, "#announce-form button").click()
        wait_for(lambda: (p.status().get("announcing") or {}).get("source") == a.clip, "Announce plays the clip over the music")
        server.shutdown()

        # An error shows as a message, and the control still works.
        d.find_element(By.ID, "announce-source").clear()
        d.find_element(By.ID, "announce-source").send_keys(a.music + "/no-such-clip.flac")
        d.find_element(By.CSS_SELECTOR, "#announce-form button").click()
        wait_for(lambda: d.find_element(By.ID, "message").is_displayed() and "no-such-clip" in d.find_element(By.ID, "message").text,
                 "a missing clip's error shows as a message")

        # Stop, from the page.
        tab(d, "now")
        click(d, "stop")
        wait_for(lambda: p.status()["state"] == "stopped", "Stop stops")
        wait_for(lambda: d.find_element(By.ID, "title").text == "Nothing playing", "the page says nothing plays")
    finally:
        d.quit()

    # The desktop's layout, playing.
    p.run("play", "--index", "1")
    d = browser(1280, 800)
    try:
        d.get(a.url)
        wait_for(lambda: d.find_element(By.ID, "link").text == "connected", "desktop: the page connects")
        wait_for(lambda: d.find_element(By.ID, "title").text == p.status()["title"], "desktop: the title shows")
        wait_for(lambda: d.find_element(By.ID, "cover").is_displayed() or p.status().get("cover") is None, "desktop: the cover shows when the track has one")
        shot(d, a.shots, "web-desktop-now-playing")
        axe(d, "desktop now playing", axe_js)
        click(d, "toggle")
        wait_for(lambda: p.status()["state"] == "paused", "desktop: Pause pauses")
    finally:
        d.quit()

    # The manifest makes it installable.
    m = json.loads(urllib.request.urlopen(a.url + "manifest.webmanifest").read())
    check(m.get("display") == "standalone" and {"192x192", "512x512"} <= {i["sizes"] for i in m["icons"]},
          "the manifest is standalone with 192 and 512 px icons")


def post(url, body, headers):
    req = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        r = urllib.request.urlopen(req)
        return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


def security(a):
    api, login = a.url + "api", a.url + "login"
    js = {"Content-Type": "application/json"}
    status, body, _ = post(api, '{"cmd":"status"}', js)
    check(status == 401 and '"not_allowed"' in body, "without a session the API is refused (401): %s" % status)
    status, body, _ = post(login, '{"password":"wrong"}', js)
    check(status == 401, "a wrong password is refused (401)")
    status, body, headers = post(login, json.dumps({"password": a.password}), js)
    cookie = headers.get("Set-Cookie", "")
    check(status == 200 and "HttpOnly" in cookie and "SameSite=Strict" in cookie, "the right password gives an HttpOnly, SameSite=Strict cookie: %s" % cookie)
    session = cookie.split(";")[0]
    status, body, _ = post(api, '{"cmd":"status"}', dict(js, Cookie=session))
    check(status == 200 and json.loads(body)["ok"] is True, "with the cookie the API answers")
    status, body, _ = post(api, '{"cmd":"stop"}', dict(js, Cookie=session, Origin="http://evil.example"))
    check(status == 403, "a cross-origin POST is refused (403), even with the cookie")
    status, body, _ = post(api, 'cmd=stop', {"Content-Type": "application/x-www-form-urlencoded", "Cookie": session})
    check(status == 415, "a form POST (what a cross-site form can send) is refused (415)")
    status, body, _ = post(api, '{"cmd":"ping"}', dict(js, Authorization="Bearer " + a.password))
    check(status == 200, "a script may send the password as a bearer token")
    status, body, _ = post(api, '{"cmd":"ping","pad":"' + "x" * 70000 + '"}', dict(js, Cookie=session))
    check(status == 413, "a body over 64 KiB is refused (413)")
    try:
        code = urllib.request.urlopen(a.url + "%2e%2e/%2e%2e/etc/passwd").status
    except urllib.error.HTTPError as e:
        code = e.code
    check(code == 404, "a path outside the shipped files is 404")

    # In a browser: the login form, a wrong password, then the right one.
    d = browser(390, 844)
    try:
        d.get(a.url)
        wait_for(lambda: d.find_element(By.ID, "login").is_displayed(), "the page asks for the password")
        check(not d.find_element(By.ID, "app").is_displayed(), "nothing else shows before the login")
        d.find_element(By.ID, "password").send_keys("wrong")
        d.find_element(By.ID, "login-button").click()
        wait_for(lambda: "Wrong password" in d.find_element(By.ID, "message").text, "a wrong password is said so")
        check(d.find_element(By.ID, "login").is_displayed(), "and the page stays locked")
        d.find_element(By.ID, "password").clear()
        d.find_element(By.ID, "password").send_keys(a.password)
        d.find_element(By.ID, "login-button").click()
        wait_for(lambda: d.find_element(By.ID, "app").is_displayed(), "the right password opens the remote")
        wait_for(lambda: d.find_element(By.ID, "link").text == "connected", "and its event stream connects")
        check(d.execute_script("return document.cookie") == "", "the session cookie is not readable by scripts")
        # A page on another origin cannot drive it: its fetch is refused.
        other, other_url = serve_stream(os.path.abspath(__file__))
        d.get(other_url.rsplit("/", 1)[0] + "/")
        result = d.execute_async_script("""const done = arguments[arguments.length - 1];
            fetch(arguments[0], {method: 'POST', credentials: 'include', headers: {'Content-Type': 'application/json'}, body: '{"cmd":"stop"}'})
              .then(r => done('status ' + r.status)).catch(e => done('refused: ' + e));""", api)
        check(result.startswith("refused") or result in ("status 401", "status 403"), "a cross-origin page's fetch does not get through (%s)" % result)
        other.shutdown()
    finally:
        d.quit()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["controls", "security"])
    ap.add_argument("url")
    ap.add_argument("--playctl")
    ap.add_argument("--socket")
    ap.add_argument("--music")
    ap.add_argument("--stream")
    ap.add_argument("--clip")
    ap.add_argument("--shots")
    ap.add_argument("--password")
    ap.add_argument("--axe", default="/var/lib/playd-test/python/selenium_axe_python/axe-core/axe.min.js")
    a = ap.parse_args()
    if not a.url.endswith("/"):
        a.url += "/"
    try:
        (controls if a.mode == "controls" else security)(a)
    except Exception as e:
        import traceback
        traceback.print_exc()
        failures.append("raised %s" % e)
    if failures:
        print("\n%d check(s) failed:\n  %s" % (len(failures), "\n  ".join(failures)))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
