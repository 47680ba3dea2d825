package import Hummingbird
import NIOCore
package import Observability

extension Response {
    /// A `text/plain` answer: `text` and a newline (health checks, short errors).
    package static func text(_ status: HTTPResponse.Status, _ text: String, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "text/plain; charset=utf-8"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: text + "\n")))
    }

    /// The Prometheus text exposition of `registry`, for `GET /metrics`.
    package static func metrics(_ registry: MetricsRegistry) -> Response {
        Response(
            status: .ok,
            headers: [.contentType: MetricsRegistry.contentType],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.exposition()))
        )
    }
}
