package import Hummingbird

/// A body that is not a form: 415 for another content type, 400 for a malformed multipart body.
extension FormError: HTTPResponseError {
    package var status: HTTPResponse.Status { self == .unsupportedContentType ? .unsupportedMediaType : .badRequest }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        APIController.error(status, description)
    }
}
