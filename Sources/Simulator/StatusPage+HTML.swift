import Foundation

/// The status page a person reads: the counters, and a phone lock screen per device token with what arrived on it.
/// The page reloads its screens from `/screens` every second while it is open (no script: a static snapshot).
extension StatusPage {
    static func page(_ state: SimulatorState) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
        <title>APNs simulator: what arrived on the phones</title>
        <style>\(style)</style></head>
        <body><h1>APNs simulator</h1>
        <p class="hint">Every notification the simulator accepted, on the lock screen of the device it was sent to.
        Live: this page updates itself. Raw figures: <a href="/status.json">/status.json</a>.</p>
        <div id="live">\(screens(state))</div>
        <script>
        async function refresh() {
          try {
            const answer = await fetch('/screens', {cache: 'no-store'});
            if (answer.ok) document.getElementById('live').innerHTML = await answer.text();
          } catch (error) {}
        }
        setInterval(refresh, 1000);
        </script>
        </body></html>

        """
    }

    /// The counters and the lock screens (the part of the page that updates).
    static func screens(_ state: SimulatorState) -> String {
        let counters = state.counters
        let rejected = counters.rejectedByStatus.values.reduce(0, +)
        var html = "<p class=\"counters\" id=\"counters\">"
        html += "<span><b data-counter=\"accepted\">\(counters.accepted)</b> accepted</span>"
        html += "<span><b>\(rejected)</b> refused</span>"
        html += "<span><b>\(counters.connections)</b> connections</span>"
        html += "<span><b>\(counters.feedbackTuplesSent)</b> feedback tuples sent</span></p>\n"
        html += webhooks(state.webhooks)
        let screens = LockScreen.screens(state.recent(limit: 200))
        if screens.isEmpty {
            html += "<p class=\"empty\">Nothing has arrived yet. Send a message from the test forms.</p>\n"
        }
        html += "<div class=\"phones\">\n"
        for screen in screens { html += phone(screen) }
        return html + "</div>\n"
    }

    static func phone(_ screen: LockScreen) -> String {
        let token = screen.token
        let short = token.count > 16 ? "\(token.prefix(8))…\(token.suffix(8))" : token
        // An Android phone (its notifications came through FCM), a browser (Web Push) or an iPhone.
        let first = screen.items.first
        let platform = first?.android == true ? "android" : first?.web == true ? "browser" : "iphone"
        let label = ["android": "Android", "browser": "Browser"][platform] ?? "iPhone"
        var html = "<section class=\"phone \(platform)\" data-token=\"\(escape(token))\" data-platform=\"\(platform)\">\n"
        html += "<div class=\"clock\">\(time(screen.items.first?.arrival ?? Date()))</div>\n"
        html += "<div class=\"device\" title=\"\(escape(token))\">\(label) \(escape(short))</div>\n"
        for item in screen.items {
            html += notification(item)
        }
        return html + "</section>\n"
    }

    static func notification(_ item: LockScreenItem) -> String {
        var html = "<article class=\"notification\(item.silent ? " silent" : "")\">\n<header><span class=\"app\">\(escape(item.app))</span>"
        html += "<time>\(time(item.arrival))</time></header>\n"
        if item.silent {
            html += "<p class=\"body\"><em>silent push</em> (content-available: delivered to the app, nothing shown)</p>\n"
        }
        if let title = item.title { html += "<p class=\"title\">\(escape(title))</p>\n" }
        if let subtitle = item.subtitle { html += "<p class=\"subtitle\">\(escape(subtitle))</p>\n" }
        if let body = item.body { html += "<p class=\"body\">\(escape(body))</p>\n" }
        var details: [String] = []
        if let badge = item.badge { details.append("<span class=\"badge\" title=\"badge\">\(badge)</span>") }
        if let sound = item.sound { details.append("<span class=\"sound\">♪ \(escape(sound))</span>") }
        if !item.customKeys.isEmpty {
            details.append("<span class=\"data\">data: \(escape(item.customKeys.joined(separator: ", ")))</span>")
        }
        if !details.isEmpty { html += "<footer>\(details.joined(separator: " "))</footer>\n" }
        return html + "</article>\n"
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// `14:05:09`, local time.
    static func time(_ date: Date) -> String {
        let parts = Calendar(identifier: .gregorian).dateComponents(in: .current, from: date)
        return String(format: "%02d:%02d:%02d", parts.hour ?? 0, parts.minute ?? 0, parts.second ?? 0)
    }

    static let style = """
        body { font-family: -apple-system, system-ui, sans-serif; background: #eef0f3; margin: 1.5em; color: #222; }
        .hint { color: #555; max-width: 60em; }
        .counters span { display: inline-block; background: #fff; border-radius: 8px; padding: .4em .8em; margin-right: .5em; }
        .phones { display: flex; flex-wrap: wrap; gap: 1.5em; margin-top: 1em; }
        .phone { width: 300px; min-height: 480px; border-radius: 36px; border: 10px solid #111; padding: 1em .8em;
                 background: linear-gradient(160deg, #3a4f7a, #7a5c8f 60%, #c2839a); color: #fff; box-sizing: border-box; }
        .clock { font-size: 3em; font-weight: 200; text-align: center; }
        .device { text-align: center; font-size: .75em; opacity: .8; margin-bottom: 1em; font-family: monospace; }
        .notification { background: rgba(255,255,255,.85); color: #111; border-radius: 14px; padding: .6em .8em; margin-bottom: .6em; }
        .notification.silent { background: rgba(255,255,255,.35); color: #fff; }
        .notification header { display: flex; justify-content: space-between; font-size: .7em; text-transform: uppercase; opacity: .7; }
        .notification p { margin: .2em 0; }
        .title { font-weight: 600; }
        .subtitle { font-weight: 500; font-size: .9em; }
        .notification footer { font-size: .75em; margin-top: .3em; }
        .badge { background: #e0352b; color: #fff; border-radius: 1em; padding: 0 .5em; font-weight: 600; }
        """

    /// Delivery events a webhook POSTed here (`pushchat-api webhooks add NAME --url http://127.0.0.1:PORT/webhooks`,
    /// the host listed in `webhook_private_hosts`): the counts and the last events.
    static func webhooks(_ inbox: WebhookInbox) -> String {
        let counters = inbox.counters
        var html =
            "<p class=\"counters\" id=\"webhooks\"><span><b data-counter=\"webhook-events\">\(counters.events)</b> delivery events</span>"
        html += "<span><b>\(counters.posts)</b> webhook POSTs</span><span><b>\(counters.refused)</b> refused</span></p>\n"
        if counters.posts == 0 && counters.refused == 0 {
            html += "<p class=\"hint\">No delivery events yet. A webhook pointed at <code>/webhooks</code> on this page's port shows its "
            html += "events here; with <code>--webhook-secret</code> each POST's signature is checked as the README's receiver does.</p>\n"
            return html
        }
        html += "<ul class=\"events\">"
        for event in inbox.last.reversed() {
            let token = event.token.map { " " + escape(String($0.prefix(12))) + "…" } ?? ""
            html += "<li><code>\(escape(event.type))</code> \(escape(event.id))\(token)</li>"
        }
        return html + "</ul>\n"
    }
}
