
// TestFilesOverS3: the same upload and read on both faces with
// files.storage on an S3-compatible store (an in-process S3 server). Not
// parallel: the store's credentials are environment variables.
func TestFilesOverS3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("bothy-files"); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s3.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "sam-example")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.FilesRequireScan: "false",
		config.FilesStorage: "s3://bothy-files?region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape(s3.URL)}})
	content := []byte("Sam's notes, kept in S3\n")
	file := mustUpload(t, env, "sam", "notes.txt", content)
	if r := download(t, env, "sam", file); r.Status != http.StatusOK || !bytes.Equal(r.Body, content) {
		t.Fatalf("read from S3: %d %s", r.Status, r.Body)
	}
	if status, body := gqlUpload(t, env, "sam", content, true); status != http.StatusOK || !strings.Contains(string(body), `"scanStatus":"NOT_SCANNED"`) {
		t.Fatalf("GraphQL upload to S3: %d %s", status, body)
	}
	if n := len(backend.ListBucketsSafe()); n != 1 {
		t.Fatalf("%d buckets", n)
	}
}
