import Foundation
import Hummingbird
import Settings

/// The tutorial's helper pages: a start page, and HTML forms that post to `/api.php` so a person can play a second
/// device from a browser.
enum TestPages {
    struct Field {
        let name: String
        let label: String
        var value = ""
        var multiline = false
    }

    struct Form {
        /// `join`, `leave`, `update` or `message`.
        let command: String
        let title: String
        let fields: [Field]
        /// The page's path under /test.
        let page: String
    }

    /// The 2011 app's forms (`udid`), and the 2013 ("iOS 6") edition's (`user_id`; its forms' default is 40 digits,
    /// the app itself sends an NSUUID without dashes).
    static let forms: [Form] =
        editionForms(idField: "udid", idLabel: "udid (40 or 32 hex digits)", suffix: "", edition: "")
        + editionForms(idField: "user_id", idLabel: "user_id (the 2013 app: 32 or 40 hex digits)", suffix: "_2013", edition: " (2013 app)")

    static func editionForms(idField: String, idLabel: String, suffix: String, edition: String) -> [Form] {
        let id = Field(name: idField, label: idLabel, value: "0123456789abcdef0123456789abcdef01234567")
        return [
            Form(
                command: "join",
                title: "Join a chat room" + edition,
                fields: [
                    id,
                    Field(name: "token", label: "device token (64 hex digits, or 0)", value: String(repeating: "ab", count: 32)),
                    Field(name: "name", label: "name", value: "Browser"),
                    Field(name: "code", label: "secret code (the room)", value: "test"),
                ],
                page: "api_join\(suffix).html"
            ),
            Form(command: "leave", title: "Leave the chat room" + edition, fields: [id], page: "api_leave\(suffix).html"),
            Form(
                command: "update",
                title: "Update the device token" + edition,
                fields: [id, Field(name: "token", label: "device token (64 hex digits)", value: String(repeating: "cd", count: 32))],
                page: "api_update\(suffix).html"
            ),
            Form(
                command: "message",
                title: "Send a message" + edition,
                fields: [id, Field(name: "text", label: "text (at most 190 bytes)", value: "Hello from the browser!", multiline: true)],
                page: "api_message\(suffix).html"
            ),
        ]
    }

    static func addRoutes(to router: Router<APIRequestContext>, mode: Mode) {
        router.get("/") { _, _ in
            html(
                "PushChat Server",
                "<p>PushChat Server works (\(mode.rawValue) mode).</p>\n<ul>\n"
                    + "<li><a href=\"/test/database\">Check the database</a></li>\n"
                    + forms.map { "<li><a href=\"/test/\($0.page)\">\($0.title)</a></li>" }.joined(separator: "\n")
                    + "\n</ul>"
            )
        }
        for form in forms {
            let page = html(form.title, formHTML(command: form.command, fields: form.fields))
            router.get("/test/\(form.page)") { _, _ in page }
        }
    }

    static func formHTML(command: String, fields: [Field]) -> String {
        var body =
            "<form method=\"post\" action=\"/api.php\" id=\"\(command)\">\n<input type=\"hidden\" name=\"cmd\" value=\"\(command)\">\n"
        for field in fields {
            body += "<p><label>\(field.label)<br>"
            if field.multiline {
                body += "<textarea name=\"\(field.name)\" rows=\"3\" cols=\"64\">\(escape(field.value))</textarea>"
            } else {
                body += "<input name=\"\(field.name)\" size=\"70\" value=\"\(escape(field.value))\">"
            }
            body += "</label></p>\n"
        }
        return body + "<p><input type=\"submit\" id=\"send\" value=\"Send\"></p>\n</form>\n<p><a href=\"/\">Back</a></p>"
    }

    static func html(_ title: String, _ body: String) -> Response {
        let page = """
            <!DOCTYPE html>
            <html><head><meta charset="utf-8"><title>\(escape(title))</title></head>
            <body><h1>\(escape(title))</h1>
            \(body)
            </body></html>

            """
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: .init(string: page)))
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
