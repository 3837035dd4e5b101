package egress

import (
	"strings"
	"testing"
)

// BenchmarkCheckGraphQL: the check of gh's RepositoryInfo request, as
// each of gh pr create's GraphQL calls pays it.
func BenchmarkCheckGraphQL(b *testing.B) {
	body := []byte(gqlBody(ghRepositoryInfo, map[string]any{"owner": "me", "name": "repo"}))
	for b.Loop() {
		if _, why := checkGraphQL(body, "me/repo"); why != "" {
			b.Fatal(why)
		}
	}
}

// BenchmarkCheckGraphQLWorst: what a session can make the proxy read per
// request: a body near MaxGraphQLBody with a document at the parser's
// token bound and, beside it, a variable that is a list of zeros (up to
// maxGraphQLJSONTokens) or a string.
func BenchmarkCheckGraphQLWorst(b *testing.B) {
	b.Run("list", func(b *testing.B) { worstGraphQL(b, make([]int, maxGraphQLJSONTokens-100)) })
	b.Run("string", func(b *testing.B) { worstGraphQL(b, strings.Repeat("x", MaxGraphQLBody-30000)) })
}

func worstGraphQL(b *testing.B, pad any) {
	body := []byte(gqlBody("{viewer{"+strings.Repeat("login ", maxGraphQLTokens-10)+"}}", map[string]any{"pad": pad}))
	if len(body) > MaxGraphQLBody {
		b.Fatalf("%d bytes", len(body))
	}
	for b.Loop() {
		if _, why := checkGraphQL(body, "me/repo"); why != "" {
			b.Fatal(why)
		}
	}
}
