// The import that makes h2spec a dependency of this module (never built: the "tools" tag is never set).
//go:build tools

package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
