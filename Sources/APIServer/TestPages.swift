import Foundation
import Hummingbird
import Shared

/// The tutorial's helper pages: a start page, and HTML forms that post to `/api.php` so a person can play a second
/// device from a browser.
enum TestPages {
    struct Field {
        let name: String
        let label: String
        var value = ""
        var multiline = false
    }

    static let forms: [(command: String, title: String, fields: [Field])] = [
        (
            "join", "Join a chat room",
            [
                Field(name: "udid", label: "udid (40 or 32 hex digits)", value: "0123456789abcdef0123456789abcdef01234567"),
                Field(name: "token", label: "device token (64 hex digits, or 0)", value: String(repeating: "ab", count: 32)),
                Field(name: "name", label: "name", value: "Browser"),
                Field(name: "code", label: "secret code (the room)", value: "test"),
            ]
        ),
        (
            "leave", "Leave the chat room",
            [
                Field(name: "udid", label: "udid", value: "0123456789abcdef0123456789abcdef01234567")
            ]
        ),
        (
            "update", "Update the device token",
            [
                Field(name: "udid", label: "udid", value: "0123456789abcdef0123456789abcdef01234567"),
                Field(name: "token", label: "device token (64 hex digits)", value: String(repeating: "cd", count: 32)),
            ]
        ),
        (
            "message", "Send a message",
            [
                Field(name: "udid", label: "udid", value: "0123456789abcdef0123456789abcdef01234567"),
                Field(name: "text", label: "text (at most 190 bytes)", value: "Hello from the browser!", multiline: true),
            ]
        ),
    ]

    static func addRoutes(to router: Router<APIRequestContext>, mode: Mode) {
        router.get("/") { _, _ in
            html(
                "PushChat Server",
                "<p>PushChat Server works (\(mode.rawValue) mode).</p>\n<ul>\n"
                    + "<li><a href=\"/test/database\">Check the database</a></li>\n"
                    + forms.map { "<li><a href=\"/test/api_\($0.command).html\">\($0.title)</a></li>" }.joined(separator: "\n")
                    + "\n</ul>"
            )
        }
        for form in forms {
            let page = html(form.title, formHTML(command: form.command, fields: form.fields))
            router.get("/test/api_\(form.command).html") { _, _ in page }
        }
    }

    static func formHTML(command: String, fields: [Field]) -> String {
        var body = "<form method=\"post\" action=\"/api.php\">\n<input type=\"hidden\" name=\"cmd\" value=\"\(command)\">\n"
        for field in fields {
            body += "<p><label>\(field.label)<br>"
            if field.multiline {
                body += "<textarea name=\"\(field.name)\" rows=\"3\" cols=\"64\">\(escape(field.value))</textarea>"
            } else {
                body += "<input name=\"\(field.name)\" size=\"70\" value=\"\(escape(field.value))\">"
            }
            body += "</label></p>\n"
        }
        return body + "<p><input type=\"submit\" value=\"Send\"></p>\n</form>\n<p><a href=\"/\">Back</a></p>"
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
