#!/usr/bin/env python3
"""The browser test: a person with a browser plays two phones through the test forms, and watches the message
arrive on the simulator's lock-screen page. Run by scripts/test.sh (which installs Debian's chromium when missing).

    browser-test.py BIN_DIR OUTPUT_DIR

Needs PUSHCHAT_TEST_DATABASE_URL (the test cluster); as root, PUSHCHAT_TEST_SERVICE_USER (the executables drop to it).
Starts the APNs simulator, pushchat-api and pushchat-push (development mode, a fresh database), then drives headless
Chromium over the DevTools protocol (--remote-debugging-pipe, no network port): joins a 2011 device (udid) and a
2013 device (user_id) through the forms, sends a message from the first, checks the rows in PostgreSQL, opens the
simulator's page and waits for the message on the recipient's lock screen. The screenshot lands in OUTPUT_DIR.
Chromium talks to 127.0.0.1 only: every other host resolves to nothing and goes to a dead proxy.
"""
import base64
import json
import urllib.request
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

BIN, OUTPUT = sys.argv[1], sys.argv[2]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts", "lib"))
from harness import SERVER_URL, SERVICE_USER, Harness, answers, as_service_user, database_url, free_port, psql, tear_down  # noqa: E402

harness = Harness("browser-test", 180)  # the whole test stops by itself
fail, wait_until = harness.fail, harness.wait_until


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fd 3 commands, fd 4 answers, NUL-separated)."""

    def __init__(self, profile):
        command_read, self.command_write = os.pipe()
        self.answer_read, answer_write = os.pipe()
        flags = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
            f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
            "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--metrics-recording-only",
            "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--proxy-server=http://127.0.0.1:9",
            "--proxy-bypass-list=127.0.0.1", "--window-size=1280,900", "about:blank",
        ]
        browser = shutil.which("chromium") or shutil.which("chromium-browser") or fail("chromium is not installed")
        script = f'exec "$0" "$@" 3<&{command_read} 4>&{answer_write}'
        self.process = subprocess.Popen(["sh", "-c", script, browser] + flags, pass_fds=(command_read, answer_write),
                                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUTPUT, "chromium.log"), "w"))
        os.close(command_read)
        os.close(answer_write)
        self.buffer = b""
        self.next_id = 0
        self.session = None

    def tab(self):
        """A new tab; the calls that follow go to it until another is chosen with `use`."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        return self.session

    def use(self, session):
        self.session = session

    def call(self, method, params=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target.") and method != "Browser.close":
            message["sessionId"] = self.session
        os.write(self.command_write, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self.buffer:
                if time.monotonic() > harness.deadline:
                    fail(f"Chromium did not answer {method}")
                chunk = os.read(self.answer_read, 65536)
                if not chunk:
                    fail(f"Chromium exited (see {OUTPUT}/chromium.log)")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    fail(f"{method}: {answer['error']}")
                return answer["result"]

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            fail(f"script failed: {expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url):
        self.call("Page.navigate", {"url": url})
        wait_until(f"{url} to load", lambda: self.evaluate("location.href") == url
                   and self.evaluate("document.readyState") == "complete")

    def submit_form(self, url, values):
        """Opens a test form, types the values into its fields, presses Send, returns the page the API answered."""
        self.open(url)
        for name, value in values.items():
            found = self.evaluate(f"""(() => {{
                const field = document.querySelector('[name="{name}"]');
                if (!field) return false;
                field.value = {json.dumps(value)};
                return true; }})()""")
            if not found:
                fail(f"{url} has no field {name}")
        self.evaluate("document.getElementById('send').click()")
        wait_until("the API's answer", lambda: self.evaluate("location.pathname") == "/api.php"
                   and self.evaluate("document.readyState") == "complete")
        return self.evaluate("document.body.innerText").strip()

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close")
        except SystemExit:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def main():
    os.makedirs(OUTPUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="pushchat-browser-")
    os.chmod(work, 0o755)
    processes = []
    database = f"pushchat_browser_{os.getpid()}"
    url = database_url(database)
    psql(SERVER_URL, f"CREATE DATABASE {database}")
    browser = None
    try:
        certs = os.path.join(work, "certs")
        gateway, feedback, status, api, push_status, fcm, webpush = (free_port() for _ in range(7))
        # The development service account's token URI names the simulator's Google port.
        subprocess.run(["bash", os.path.join(REPO, "deploy/dev-certs.sh"), certs], check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, PUSHCHAT_DEV_PASSPHRASE="browser-test", PUSHCHAT_DEV_FCM_PORT=str(fcm)))
        service_account = os.path.join(certs, "fcm-service-account.json")
        # The application server's VAPID key for browsers (Web Push): its public half is what a page subscribes with.
        vapid = os.path.join(certs, "vapid.pem")
        made = subprocess.run([os.path.join(BIN, "pushchat-api"), "webpush", "generate-key", vapid], capture_output=True, text=True)
        if made.returncode != 0:
            fail(f"webpush generate-key: {made.stderr}")
        vapid_public = made.stdout.strip().splitlines()[-1]
        if SERVICE_USER:
            group = pwd.getpwnam(SERVICE_USER).pw_gid
            for directory, _, files in os.walk(work):
                os.chown(directory, 0, group)
                os.chmod(directory, 0o750)
                for name in files:
                    os.chown(os.path.join(directory, name), 0, group)
                    os.chmod(os.path.join(directory, name), 0o640)
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PUSHCHAT_")}
        environment.update({
            "PUSHCHAT_DATABASE_URL": url, "PUSHCHAT_API_HOST": "127.0.0.1", "PUSHCHAT_API_PORT": str(api),
            "PUSHCHAT_APNS_GATEWAY": f"127.0.0.1:{gateway}", "PUSHCHAT_APNS_FEEDBACK": f"127.0.0.1:{feedback}",
            "PUSHCHAT_APNS_CERTIFICATE": os.path.join(certs, "ck.pem"), "PUSHCHAT_APNS_PASSPHRASE": "browser-test",
            "PUSHCHAT_APNS_CA_FILE": os.path.join(certs, "ca.pem"), "PUSHCHAT_LOG_FILE": "-",
            "PUSHCHAT_PUSH_SETTLE": "0.2", "PUSHCHAT_PUSH_STATUS_PORT": str(push_status),
            "PUSHCHAT_MIGRATIONS_DIR": os.path.join(REPO, "migrations"),
            "PUSHCHAT_FCM_SERVICE_ACCOUNT_FILE": service_account, "PUSHCHAT_FCM_HOST": f"127.0.0.1:{fcm}",
            "PUSHCHAT_FCM_CA_FILE": os.path.join(certs, "ca.pem"),
            "PUSHCHAT_WEBPUSH_VAPID_KEY_FILE": vapid, "PUSHCHAT_WEBPUSH_SUBJECT": "mailto:browser-test@example.com",
            "PUSHCHAT_WEBPUSH_PRIVATE_HOSTS": f"127.0.0.1:{webpush}", "PUSHCHAT_WEBPUSH_CA_FILE": os.path.join(certs, "ca.pem"),
        })
        migrate = subprocess.run(as_service_user([os.path.join(BIN, "pushchat-api"), "migrate", "development"]),
                                 env=environment, capture_output=True, text=True, cwd=work)
        if migrate.returncode != 0:
            fail(f"migrate: {migrate.stderr}")

        def start(name, arguments):
            log = open(os.path.join(OUTPUT, f"{name}.log"), "w")
            processes.append(subprocess.Popen(as_service_user([os.path.join(BIN, name)] + arguments), env=environment,
                                              stdout=log, stderr=subprocess.STDOUT, cwd=work))

        start("pushchat-apns-sim", ["--certs", certs, "--gateway-port", str(gateway), "--feedback-port", str(feedback),
                                    "--http2-port", "0", "--status-port", str(status), "--fcm-port", str(fcm),
                                    "--fcm-service-account", service_account, "--webpush-port", str(webpush)])
        start("pushchat-api", ["serve", "development"])
        start("pushchat-push", ["development"])

        wait_until("the API", lambda: answers(api, "/healthz"))
        wait_until("the simulator's page", lambda: answers(status, "/status.json"))
        wait_until("the push daemon's gateway connection", lambda: answers(push_status, "/readyz"))

        profile = os.path.join(work, "chromium")
        browser = Chromium(profile)
        forms = browser.tab()
        base = f"http://127.0.0.1:{api}/test"
        ann = {"udid": "a" * 40, "token": "a1" * 32, "name": "Ann", "code": "browser room"}
        bob = {"user_id": "9F3A61C2D4B84E0F8A7B6C5D4E3F2A1B", "token": "b2" * 32, "name": "Bob", "code": "browser room"}
        text = "Hello Bob, from a real browser!"

        def submit(page, values):
            browser.use(forms)
            answer = browser.submit_form(f"{base}/{page}", values)
            if answer != "OK":
                fail(f"{page}: the API answered {answer!r}")
            print(f"    {page}: OK")

        submit("api_join.html", ann)
        submit("api_join_2013.html", bob)
        # An Android phone in the same room (the chat API's platform=fcm; the test pages are the iPhone apps' forms).
        dee = {"udid": "d" * 40, "token": "dEe0android:APA91b" + "Q" * 140, "name": "Dee", "code": "browser room"}
        joined = browser.evaluate(
            f"fetch('{base.removesuffix('/test')}/api.php', {{method: 'POST', body: new URLSearchParams("
            f"{json.dumps(dict(dee, cmd='join', platform='fcm'))})}}).then(r => r.status)")
        if joined != 200:
            fail(f"the Android phone's join answered {joined!r}")
        print("    join (platform=fcm): OK")
        # A browser in the same room: it subscribes (the simulator's page plays its push service) with the key the
        # server signs with, and joins with its subscription as the token (platform=web).
        request = urllib.request.Request(f"http://127.0.0.1:{status}/browsers", method="POST",
                                         data=json.dumps({"app": "PushChat", "application_server_key": vapid_public}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            subscription = answer.read().decode()
        bea_id = json.loads(subscription)["endpoint"].rsplit("/", 1)[1]
        bea = {"udid": "e" * 40, "token": subscription, "name": "Bea", "code": "browser room"}
        joined = browser.evaluate(
            f"fetch('{base.removesuffix('/test')}/api.php', {{method: 'POST', body: new URLSearchParams("
            f"{json.dumps(dict(bea, cmd='join', platform='web'))})}}).then(r => r.status)")
        if joined != 200:
            fail(f"the browser's join answered {joined!r}")
        print("    join (platform=web): OK")

        # The simulator's page, open in a second tab before the message is sent: it must update by itself.
        screen = browser.tab()
        browser.open(f"http://127.0.0.1:{status}/")
        if "Nothing has arrived yet" not in browser.evaluate("document.body.innerText"):
            fail("the simulator's page shows notifications before any was sent")
        browser.evaluate("window.openedBeforeTheMessage = true")

        submit("api_message.html", {"udid": ann["udid"], "text": text})
        users = psql(url, "SELECT string_agg(nickname || '=' || udid, ',' ORDER BY nickname) FROM active_users")
        if users != f"Ann={ann['udid']},Bea={bea['udid']},Bob={bob['user_id'].lower()},Dee={dee['udid']}":
            fail(f"active_users holds {users!r}")
        stored = psql(url, "SELECT text FROM messages")
        if stored != text:
            fail(f"messages holds {stored!r}")
        # Through the view: once sent, the row may already have moved from push_queue to push_history.
        queued = psql(url, f"SELECT count(*) FROM push_deliveries WHERE device_token = '{bob['token']}'")
        if queued != "1":
            fail(f"push_deliveries holds {queued} rows for Bob")

        browser.use(screen)
        selector = f'section.phone[data-token="{bob["token"]}"]'
        found = wait_until("the message on Bob's lock screen", lambda: browser.evaluate(
            f"(document.querySelector('{selector}') || {{innerText: ''}}).innerText"), timeout=15)
        if "Ann" not in found or text not in found:
            fail(f"Bob's lock screen shows {found!r}")
        if browser.evaluate("window.openedBeforeTheMessage") is not True:
            fail("the page was reloaded instead of updating itself")
        android = f'section.phone[data-token="{dee["token"]}"]'
        found = wait_until("the message on Dee's Android lock screen", lambda: browser.evaluate(
            f"(document.querySelector('{android}') || {{innerText: ''}}).innerText"), timeout=15)
        if "Ann" not in found or text not in found or "Android" not in found:
            fail(f"Dee's Android lock screen shows {found!r}")
        if browser.evaluate(f"document.querySelector('{android}').dataset.platform") != "android":
            fail("Dee's phone is not shown as an Android phone")
        web = f'section.phone[data-token="{bea_id}"]'
        found = wait_until("the message on Bea's browser lock screen", lambda: browser.evaluate(
            f"(document.querySelector('{web}') || {{innerText: ''}}).innerText"), timeout=15)
        if "Ann" not in found or text not in found or "Browser" not in found:
            fail(f"Bea's browser lock screen shows {found!r}")
        if browser.evaluate(f"document.querySelector('{web}').dataset.platform") != "browser":
            fail("Bea's browser is not shown as a browser")
        if browser.evaluate(f"document.querySelector('{selector}').dataset.platform") != "iphone":
            fail("Bob's phone is not shown as an iPhone")
        if browser.evaluate(f"document.querySelector('section.phone[data-token=\"{ann['token']}\"]') !== null"):
            fail("Ann's own message appears on her lock screen")
        wait_until("the row for Bob to be stamped sent", lambda: psql(
            url, f"SELECT count(*) FROM push_deliveries WHERE device_token = '{bob['token']}' AND time_sent IS NOT NULL") == "1")
        screenshot = os.path.join(OUTPUT, "lock-screen.png")
        browser.screenshot(screenshot)
        print(f"    the message is on Bob's iPhone, Dee's Android and Bea's browser lock screens (the open page updated itself); screenshot: {screenshot}")
    finally:
        if browser:
            browser.close()
        tear_down(processes, database, work)


if __name__ == "__main__":
    main()
    print("browser-test: passed")
