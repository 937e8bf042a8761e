SELECT * FROM items WHERE qty > 0
